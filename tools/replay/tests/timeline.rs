//! What `--plot` draws comes from a `Timeline` the replay keeps; these check it holds
//! what the budget did: use after each event, refusals, holds, halts, the venue's
//! throttles and bans, labels kept through the replay and their use per window.

use ergon_core::Why;
use ergon_replay::{run_with, Options, Timeline};

const MS: i64 = 1_000_000;

fn timeline(trace: &str) -> (Timeline, String) {
    let mut out = Vec::new();
    let options = Options {
        timeline: true,
        ..Options::default()
    };
    let replayed = run_with(trace.as_bytes(), &mut out, options).expect("replays");
    (
        replayed.timeline.expect("kept"),
        String::from_utf8(out).expect("utf-8"),
    )
}

const TRACE: &str = r#"{"bucket":"weight","kind":"fixed","limit":4,"window_ms":1000,"headroom":{"normal":1,"bulk":2}}
{"bucket":"conc","kind":"inflight","limit":2}
{"bucket":"ip","kind":"gate"}
{"t":0,"charge":"a","label":"trade:order","parts":{"weight":2,"conc":1,"ip":0}}
{"t":1000000,"charge":"b","label":"mon:book","parts":{"weight":1,"conc":1}}
{"t":2000000,"charge":"c","label":"mon:book","parts":{"weight":1}}
{"t":3000000,"sent":"a"}
{"t":4000000,"complete":"a"}
{"t":5000000,"throttled":"weight","wait_ms":100}
{"t":6000000,"charge":"d","class":"urgent","parts":{"weight":1}}
{"t":7000000,"banned":"ip"}
{"t":8000000,"charge":"e","parts":{"ip":0}}
{"t":9000000,"clear_halt":"ip"}
{"t":1000000000,"charge":"f","label":"trade:order","parts":{"weight":1}}
"#;

#[test]
fn the_timeline_follows_the_budget() {
    let (tl, out) = timeline(TRACE);
    assert!(
        !out.contains("label"),
        "the output lines do not change: {out}"
    );
    assert_eq!(tl.span, Some((0, 1000 * MS)));
    let [weight, conc, ip] = &tl.buckets[..] else {
        panic!("three buckets, in order: {:?}", tl.buckets.len())
    };
    assert_eq!(weight.name, "weight");
    assert_eq!(weight.allowances, [4, 3, 2], "urgent, normal, bulk");
    // 2, 3, then c is refused (normal may use 3), the window turns at 1 s.
    assert_eq!(weight.used, [(0, 2), (MS, 3), (1000 * MS, 1)]);
    let refusals: Vec<(i64, Why, u64)> = weight
        .refusals
        .iter()
        .map(|r| (r.t, r.why, r.used))
        .collect();
    assert_eq!(refusals, [(2 * MS, Why::Full, 3), (6 * MS, Why::Held, 3)]);
    assert_eq!(weight.throttles, [5 * MS]);
    // The 100 ms wait plus the default 50 ms hold guard.
    assert_eq!(weight.holds, [(5 * MS, 155 * MS)]);
    // In flight: a and b go out, a completes.
    assert_eq!(conc.used, [(0, 1), (MS, 2), (4 * MS, 1)]);
    assert_eq!(ip.bans, [7 * MS]);
    assert_eq!(ip.halts, [(7 * MS, Some(9 * MS))]);
    assert_eq!(ip.refusals.len(), 1);
    assert_eq!(ip.refusals[0].why, Why::Halted);
}

#[test]
fn labels_are_kept_with_their_use_per_window() {
    let (tl, _) = timeline(TRACE);
    assert_eq!(
        tl.labels,
        ["", "trade:order", "mon:book"],
        "unlabelled first"
    );
    let weight = &tl.buckets[0];
    let at = |t: i64| {
        let (_, sums) = weight
            .by_label
            .iter()
            .rev()
            .find(|(at, _)| *at <= t)
            .expect("a sample");
        [0, 1, 2].map(|l| sums.get(l).copied().unwrap_or(0))
    };
    assert_eq!(at(0), [0, 2, 0]);
    assert_eq!(at(2 * MS), [0, 2, 1], "c was refused: it spent nothing");
    assert_eq!(at(1000 * MS), [0, 1, 0], "the window turned: only f counts");
    let conc = &tl.buckets[1];
    let (_, last) = conc.by_label.last().expect("samples");
    assert_eq!(last[..], [0, 0, 1], "a completed, b is still in flight");
}

#[test]
fn no_timeline_unless_asked() {
    let replayed = run_with(TRACE.as_bytes(), Vec::new(), Options::default()).expect("replays");
    assert!(replayed.timeline.is_none() && replayed.compare.is_none());
}
