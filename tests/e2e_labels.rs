//! End to end: `mm_loop --labels SECS --record FILE` at 3x demand against the
//! in-process emulator. The monitoring thread prints a breakdown per label (each
//! label's requests, weight, refusals and answers) and a saturation line for the
//! bucket that refused, naming the labels that spent it; the record carries each
//! charge's label, and the replay's picture stacks each bucket's use by label.
//! The counts agree with the gateway's own.

#[allow(dead_code)]
#[path = "../examples/mm_loop.rs"]
mod mm_loop;

use std::collections::HashMap;
use std::sync::Arc;

use mm_loop::{parse_args, run, Control};
use serde_json::Value;

/// `key=N` in `line`.
fn field(line: &str, key: &str) -> u64 {
    let at = line.find(&format!(" {key}=")).expect(key) + key.len() + 2;
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

#[test]
fn labels_break_the_traffic_down_and_name_who_saturated_a_bucket() {
    let path = std::env::temp_dir().join(format!("ergon-labels-{}.jsonl", std::process::id()));
    let args = ["--duration", "3", "--labels", "1", "--record"];
    let it = args.into_iter().chain([path.to_str().unwrap()]);
    let mut o = parse_args(it.map(String::from)).unwrap();
    o.quiet = true;
    o.stream = false;
    let s = run(&o, Arc::new(Control::default()), None).expect("the loop runs");
    let trace = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);

    // Sum every breakdown line per label: the periods cover the whole run (the
    // last report is made after the loop stopped), so the sums are the totals.
    let mut requests: HashMap<String, u64> = HashMap::new();
    let mut refused = 0;
    let mut done = 0;
    for l in s.label_lines.iter().filter(|l| l.starts_with("label ")) {
        let name = l["label ".len()..].split(' ').next().unwrap().to_string();
        *requests.entry(name).or_default() += field(l, "requests");
        refused += field(l, "refused");
        done += field(l, "done");
    }
    for name in ["trade:order", "mon:book", "mon:account", "trade:close"] {
        assert!(
            requests.get(name).is_some_and(|&n| n > 0),
            "{name}: {:#?}",
            s.label_lines
        );
    }
    let g = &s.gw;
    let all: u64 = requests.values().sum();
    let limited = g.limited_full + g.limited_held + g.limited_halted + g.limited_too_big;
    assert_eq!(refused, limited, "{g:?}");
    assert!(refused > 0, "3x demand is refused locally");
    // No faults: no reconcile query, so every Done answer was an Applied event.
    assert_eq!(g.queries, 0);
    assert_eq!(done, g.applied, "{g:?}");
    assert!(all >= g.applied, "{all} requests, {} applied", g.applied);

    // 3x demand fills the binding bucket: a saturation line names it, with who spent it.
    let sat: Vec<_> = s
        .label_lines
        .iter()
        .filter(|l| l.starts_with("saturated "))
        .collect();
    assert!(!sat.is_empty(), "{:#?}", s.label_lines);
    assert!(
        sat.iter().any(|l| l.contains("trade:order")),
        "the quotes spent the bucket: {sat:#?}"
    );

    // The record declares the labels and tags each charge with its label.
    let mut labelled: HashMap<String, u64> = HashMap::new();
    for line in trace.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["charge"].is_string() {
            if let Some(l) = v["label"].as_str() {
                *labelled.entry(l.to_string()).or_default() += 1;
            }
        }
    }
    assert!(
        trace.contains("trade:order"),
        "the declarations name the labels"
    );
    for name in ["trade:order", "mon:book"] {
        assert!(
            labelled.get(name).is_some_and(|&n| n > 0),
            "{name}: {labelled:?}"
        );
    }

    // The replay's picture stacks each bucket's use by those labels.
    let options = ergon_replay::Options {
        timeline: true,
        ..Default::default()
    };
    let replayed = ergon_replay::run_with(trace.as_bytes(), std::io::sink(), options).unwrap();
    let labels = ergon_replay::plot::Labels {
        by_label: true,
        ..Default::default()
    };
    let svg = ergon_replay::plot::svg(&replayed.timeline.unwrap(), None, &labels).unwrap();
    for name in ["trade:order", "mon:book", "mon:account"] {
        assert!(svg.contains(name), "the stack's legend names {name}");
    }
}
