//! The WebSocket lane of the simulator: half the runs send over the gateway's own
//! WebSocket API lane, its connection drops with requests in flight, those end
//! reconciled (found and never ran), every promise holds, and a run replays bit
//! for bit.

use ergon_sim::{run, Params};

#[test]
fn half_the_runs_send_over_the_lane_and_its_drops_are_reconciled() {
    let p = Params::default();
    let (mut lanes, mut requests, mut answers, mut drops) = (0, 0, 0, 0);
    let (mut found, mut never_ran, mut executions) = (0, 0, 0);
    for seed in 0..60 {
        let o = run(seed, &p);
        assert!(o.violations.is_empty(), "seed {seed}: {:?}", o.violations);
        let Some(w) = o.ws else { continue };
        lanes += 1;
        requests += w.requests;
        answers += w.answers;
        drops += w.drops;
        executions += w.executions;
        let n = |k: &str| o.tally.get(k).copied().unwrap_or(0);
        found += n("Place Reconciled(found)") + n("Cancel Reconciled(found)");
        never_ran += n("Place Reconciled(never ran)") + n("Cancel Reconciled(never ran)");
    }
    assert!(
        (20..=40).contains(&lanes),
        "{lanes} of 60 runs had the lane"
    );
    // Orders go over it, are answered, and the user data stream reports them.
    assert!(
        requests > 1_000 && answers > 500,
        "{requests} sent, {answers} answered"
    );
    assert!(executions > 200, "{executions} executionReports");
    // Its connection drops (a frame lost, an answer lost, a delay cut, at
    // random), and what was in flight is reconciled both ways.
    assert!(drops > 100, "{drops} drops");
    assert!(
        found > 50 && never_ran > 50,
        "found {found}, never ran {never_ran}"
    );
}

#[test]
fn a_lane_seed_replays_bit_for_bit() {
    let p = Params::default();
    let (a, b) = (run(5, &p), run(5, &p));
    assert!(a.ws.is_some(), "seed 5 has the lane");
    assert_eq!(
        (a.steps, a.actions, a.writes, &a.tally, a.ws),
        (b.steps, b.actions, b.writes, &b.tally, b.ws)
    );
}

#[test]
fn without_faults_the_lane_opens_once_and_never_drops() {
    let p = Params {
        faults: false,
        ..Params::default()
    };
    let mut lanes = 0;
    for seed in 0..20 {
        let o = run(seed, &p);
        assert!(o.violations.is_empty(), "seed {seed}: {:?}", o.violations);
        let Some(w) = o.ws else { continue };
        lanes += 1;
        assert_eq!((w.opens, w.drops), (1, 0), "seed {seed}: {w:?}");
        assert!(
            w.requests > 0 && w.answers == w.requests + w.subscribed,
            "seed {seed}: {w:?}"
        );
    }
    assert!(lanes > 0);
}
