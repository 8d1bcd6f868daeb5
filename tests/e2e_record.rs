//! End to end: `mm_loop --record FILE` against the in-process emulator writes what the
//! live budget saw as an `ergon-replay` trace, and the replay of that trace makes the
//! same decisions the live budget made: every charge the gateway had admitted is
//! admitted again, every one it had refused is refused again, by id.
//!
//! What the live budget decided is written on each charge line (`"live"`). The
//! settle lines agree with it: only an admitted charge is later refunded or
//! completed (one still in flight when the run stops has neither).
//!
//! Two runs: the default one (REST polling, no stream), and one with orders over the
//! WebSocket API and its user data stream (`--order-entry ws`), whose record also
//! holds the lane's own charges: its connect and its subscribe request.

#[allow(dead_code)]
#[path = "../examples/mm_loop.rs"]
mod mm_loop;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use mm_loop::{parse_args, run, Control};
use serde_json::Value;

/// Runs `mm_loop --duration 2 --record FILE` plus `args` (its stream as `stream`
/// says), replays the record and checks every decision; the trace's lines.
fn record_and_replay(args: &[&str], stream: bool) -> Vec<Value> {
    let path = std::env::temp_dir().join(format!(
        "ergon-record-{}-{}.jsonl",
        std::process::id(),
        args.join("")
    ));
    let mut all = vec!["--duration", "2", "--record", path.to_str().unwrap()];
    all.extend_from_slice(args);
    let mut o = parse_args(all.into_iter().map(String::from)).unwrap();
    o.quiet = true;
    o.stream = stream;
    let s = run(&o, Arc::new(Control::default()), None).expect("the loop runs");
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    assert!(s.gw.sent > 20, "{:?}", s.gw);
    let trace = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);

    let lines: Vec<Value> = trace
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut live = HashMap::new();
    let mut settled = HashSet::new();
    for v in &lines {
        if let Some(id) = v["charge"].as_str() {
            let ok = v["live"]
                .as_bool()
                .expect("every charge says what the live budget did");
            live.insert(id, ok);
        }
        for verb in ["refund", "complete"] {
            if let Some(id) = v[verb].as_str() {
                settled.insert(id);
            }
        }
    }
    for id in &settled {
        assert_eq!(
            live.get(id),
            Some(&true),
            "charge {id} settled: it was admitted"
        );
    }
    let refused_live = live.values().filter(|ok| !**ok).count();
    // demand 3x: the budget refused a good part of what was offered.
    assert!(
        refused_live > 10,
        "{refused_live} refused of {}",
        live.len()
    );

    let mut out = Vec::new();
    ergon_replay::run(trace.as_bytes(), &mut out).expect("the record replays");
    let mut replayed = HashMap::new();
    for line in String::from_utf8(out).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if let (Some(id), Some(ok)) = (v["id"].as_str(), v["ok"].as_bool()) {
            replayed.insert(id.to_string(), ok);
        }
    }
    assert_eq!(
        replayed.len(),
        live.len(),
        "one decision per recorded charge"
    );
    let differ: Vec<_> = live
        .iter()
        .filter(|(id, ok)| replayed.get(**id) != Some(*ok))
        .collect();
    println!(
        "{args:?}: {} charges recorded, {refused_live} refused live; replay differs on {}",
        live.len(),
        differ.len()
    );
    assert!(
        differ.is_empty(),
        "{} of {} differ: {differ:?}",
        differ.len(),
        live.len()
    );
    lines
}

/// The urgent charges without a label: what the gateway charges on its own
/// (connects, the subscribe request, a clock read), not the strategy.
fn own_charges(lines: &[Value]) -> Vec<&Value> {
    lines
        .iter()
        .filter(|v| v["class"] == "urgent" && v["label"].is_null())
        .collect()
}

/// How many of `charges` were admitted and completed (they left). Not all need be:
/// on a slow machine a connect can still be under way when the run stops.
fn completed(lines: &[Value], charges: &[&Value]) -> usize {
    let done: HashSet<&str> = lines
        .iter()
        .filter_map(|v| v["complete"].as_str())
        .collect();
    charges
        .iter()
        .filter(|v| done.contains(v["charge"].as_str().unwrap()))
        .count()
}

/// Orders over REST: the HTTP pool's connects are in the record (charged and
/// completed: they left), and the replay agrees with every decision.
#[test]
fn a_recorded_run_replays_to_the_same_decisions() {
    let lines = record_and_replay(&["--order-entry", "rest"], false);
    let own = own_charges(&lines);
    println!("the gateway's own charges: {own:?}");
    assert!(
        completed(&lines, &own) >= 1,
        "the pool's connects are recorded"
    );
}

/// Orders over the WebSocket API: the lane's connect (the only charge on the
/// connects limit) and its subscribe request (Urgent, no label, weighed) are in
/// the record, admitted and completed, and the replay agrees with every decision.
#[test]
fn a_recorded_ws_order_entry_run_replays_to_the_same_decisions() {
    let lines = record_and_replay(&["--order-entry", "ws"], true);
    let own = own_charges(&lines);
    println!("the gateway's own charges: {own:?}");
    let (connects, others): (Vec<&Value>, Vec<&Value>) = own
        .iter()
        .copied()
        .partition(|v| v["parts"]["WS_API_CONNECTS_5M"].is_u64());
    assert!(
        completed(&lines, &connects) >= 1,
        "the lane's connect: {own:?}"
    );
    // The subscribe request: its REST twin's weight (a pool connect has none).
    let subscribes: Vec<&Value> = others
        .into_iter()
        .filter(|v| v["parts"]["REQUEST_WEIGHT_1M"].is_u64())
        .collect();
    assert!(
        completed(&lines, &subscribes) >= 1,
        "the subscribe: {own:?}"
    );
}
