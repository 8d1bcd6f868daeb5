//! A recorded trace writes its phases and waits to the nanosecond (decimal
//! milliseconds) and the windows the venue clock re-anchored (`"phase"` lines): the
//! replay reads both exactly, so its windows are the live budget's.

fn decisions(trace: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    ergon_replay::run(trace.as_bytes(), &mut out).expect("replays");
    String::from_utf8(out)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            Some((v["id"].as_str()?.to_string(), v["ok"].as_bool()?))
        })
        .collect()
}

fn ok(ids: &[(&str, bool)]) -> Vec<(String, bool)> {
    ids.iter().map(|(id, ok)| (id.to_string(), *ok)).collect()
}

#[test]
fn a_fractional_phase_moves_the_window_by_nanoseconds() {
    // Windows of 1 s start at 0.5 ms + n s: 1000.4 ms is still in the first one.
    let trace = r#"{"bucket":"o","kind":"fixed","limit":1,"window_ms":1000,"phase_ms":0.5}
{"t":999000000,"charge":"a","parts":{"o":1}}
{"t":1000400000,"charge":"b","parts":{"o":1}}
{"t":1000500000,"charge":"c","parts":{"o":1}}"#;
    assert_eq!(
        decisions(trace),
        ok(&[("a", true), ("b", false), ("c", true)])
    );
    // Rounded to whole milliseconds (0 or 1), b or c would be decided otherwise.
    for whole in ["0", "1"] {
        let rounded = trace.replace("0.5}", &format!("{whole}}}"));
        assert_ne!(decisions(&rounded), decisions(trace), "phase_ms {whole}");
    }
}

#[test]
fn a_phase_line_re_anchors_a_fixed_window() {
    let trace = r#"{"bucket":"o","kind":"fixed","limit":1,"window_ms":1000}
{"t":100000000,"charge":"a","parts":{"o":1}}
{"t":200000000,"phase":"o","phase_ms":250.000001}
{"t":1250000000,"charge":"b","parts":{"o":1}}
{"t":1250000001,"charge":"c","parts":{"o":1}}"#;
    // Never minting, the first window stretches to the first new boundary after its
    // end, 1250.000001 ms: b is still in it, c is in the next.
    assert_eq!(
        decisions(trace),
        ok(&[("a", true), ("b", false), ("c", true)])
    );
    // Without the phase line, b is in the second window of the old alignment.
    let unmoved: String = trace
        .lines()
        .filter(|l| !l.contains("phase"))
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(
        decisions(&unmoved),
        ok(&[("a", true), ("b", true), ("c", false)])
    );
}

#[test]
fn a_time_that_is_no_number_or_too_large_is_an_error_with_its_line() {
    for (bad, why) in [
        (r#""phase_ms":"x""#, "must be a number of milliseconds"),
        (r#""phase_ms":1e30"#, "too large"),
    ] {
        let trace = format!(
            "{{\"bucket\":\"o\",\"kind\":\"fixed\",\"limit\":1,\"window_ms\":1000}}\n{{\"t\":1,\"phase\":\"o\",{bad}}}"
        );
        let e = ergon_replay::run(trace.as_bytes(), &mut Vec::new()).unwrap_err();
        let e = e.to_string();
        assert!(e.contains(why) && e.contains('2'), "{bad}: {e}");
    }
}
