//! End to end: `mm_loop --record FILE` against the in-process emulator writes what the
//! live budget saw as an `ergon-replay` trace, and the replay of that trace makes the
//! same decisions the live budget made: every charge the gateway had admitted is
//! admitted again, every one it had refused is refused again, by id.
//!
//! What the live budget decided is read off the trace itself: an admitted charge is
//! the only kind that is later refunded or completed; a refused one has nothing after
//! it. The run ends only when every request has settled, so no admitted charge is
//! left open.

#[allow(dead_code)]
#[path = "../examples/mm_loop.rs"]
mod mm_loop;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use mm_loop::{parse_args, run, Control};
use serde_json::Value;

#[test]
fn a_recorded_run_replays_to_the_same_decisions() {
    let path = std::env::temp_dir().join(format!("ergon-record-{}.jsonl", std::process::id()));
    let mut o = parse_args(
        ["--duration", "2", "--record", path.to_str().unwrap()]
            .into_iter()
            .map(String::from),
    )
    .unwrap();
    o.quiet = true;
    o.stream = false;
    let s = run(&o, Arc::new(Control::default()), None).expect("the loop runs");
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    assert!(s.gw.sent > 20, "{:?}", s.gw);
    let trace = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);

    let mut charged = Vec::new();
    let mut settled = HashSet::new();
    for line in trace.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if let Some(id) = v["charge"].as_str() {
            charged.push(id.to_string());
        }
        for verb in ["refund", "complete"] {
            if let Some(id) = v[verb].as_str() {
                settled.insert(id.to_string());
            }
        }
    }
    let live: HashMap<&str, bool> = charged
        .iter()
        .map(|id| (id.as_str(), settled.contains(id)))
        .collect();
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
        "{} charges recorded, {refused_live} refused live; replay differs on {}",
        live.len(),
        differ.len()
    );
    assert!(
        differ.is_empty(),
        "{} of {} differ: {differ:?}",
        differ.len(),
        live.len()
    );
}
