//! The simulator on a fixed range of seeds: the real gateway keeps every promise
//! under network faults, and the runs exercise what they claim to (unknown
//! outcomes reconciled both ways), and replay bit for bit.

use ergon_sim::profile::Profile;
use ergon_sim::{run, shrink, Params};

#[test]
fn a_hundred_seeds_keep_every_promise() {
    let p = Params::default();
    let (mut found, mut never_ran) = (0, 0);
    for seed in 0..100 {
        let o = run(seed, &p);
        assert!(o.violations.is_empty(), "seed {seed}: {:?}", o.violations);
        found += o.tally.get("Place Reconciled(found)").copied().unwrap_or(0);
        never_ran += o
            .tally
            .get("Place Reconciled(never ran)")
            .copied()
            .unwrap_or(0);
    }
    // The faults reach the reconcile path, both ways.
    assert!(
        found > 100 && never_ran > 100,
        "found {found}, never ran {never_ran}"
    );
}

#[test]
fn a_seed_replays_bit_for_bit() {
    let p = Params::default();
    let (a, b) = (run(42, &p), run(42, &p));
    assert_eq!(
        (a.steps, a.actions, a.writes, &a.tally),
        (b.steps, b.actions, b.writes, &b.tally)
    );
}

/// The digest (`ergon-sim --digest`) is the run's: the same seed gives the same
/// one, another seed or a shorter run another, so two builds whose digests
/// agree ran each seed the same way.
#[test]
fn a_digest_tells_runs_apart() {
    let p = Params::default();
    let a = run(42, &p).digest;
    assert_eq!(a, run(42, &p).digest);
    assert_ne!(a, run(43, &p).digest);
    let short = Params {
        max_actions: 100,
        ..p
    };
    assert_ne!(a, run(42, &short).digest);
}

#[test]
fn without_faults_nothing_is_unknown() {
    let p = Params {
        faults: false,
        ..Params::default()
    };
    for seed in 0..20 {
        let o = run(seed, &p);
        assert!(o.violations.is_empty(), "seed {seed}: {:?}", o.violations);
        assert!(
            o.tally
                .keys()
                .all(|k| !k.contains("Reconciled") && !k.contains("Unresolved")),
            "seed {seed}: {:?}",
            o.tally
        );
        assert!(shrink(seed, &p).is_none());
    }
}

/// Found by the simulator on main before issue 39's fix (b6dfe87): a ban met
/// requests being reconciled, nobody cleared the halt, and their queries were
/// refused every 100 ms for ever: 4 to 10 requests were left in the ledger 600 s
/// after the end in 19 of seeds 0..150. Pinned here as a ban in every run (5 s
/// in, 20 s long, never cleared), which fails on b6dfe87 (checked in a worktree
/// of it) and passes with the fix.
#[test]
fn regression_a_reconcile_under_a_ban_ends() {
    let p = Params {
        force_ban: Some((5, 20, false)),
        ..Params::default()
    };
    for seed in 0..20 {
        let o = run(seed, &p);
        assert_eq!(o.bans, 1);
        assert!(o.violations.is_empty(), "seed {seed}: {:?}", o.violations);
    }
}

/// Found by the simulator once the venue's clock could step beyond the 30 ms
/// guard (eb669eb; issue 43): the gateway kept its fixed windows on the old
/// phase until repeated -1021 answers, which a step of a few hundred ms never
/// draws, and met 429s and bans in the windows it misplaced (86 of seeds 0..3000
/// on 11f4415's checker). Pinned as six of the seeds it found and as a step in
/// every run, mid-run, both ways (-99 ms was the book's seed 278). Without the
/// re-anchor on a stamped answer the six seeds fail, and 12 of the 20 backward
/// steps; the forward ones (the venue's windows end early, ours count on) met
/// no full window on 11f4415 either and stay as that direction's check.
#[test]
fn regression_a_venue_clock_step_beyond_the_guard_moves_the_windows() {
    // Without the WebSocket lane, as the seeds were found (the lane's steps:
    // tests/ws.rs).
    // On Binance Spot, as the seeds were found (seed 24 draws Bybit since issue
    // 43's second profile; Bybit's runs step no clock).
    let p = Params {
        ws_lane: Some(false),
        venue: Some(Profile::Spot),
        ..Params::default()
    };
    // 6626: the step's first stamped answer was a cancel-replace's (its parts'
    // `transactTime`, read since).
    for seed in [21, 24, 162, 179, 250, 385, 6626] {
        let o = run(seed, &p);
        assert!(o.violations.is_empty(), "seed {seed}: {:?}", o.violations);
    }
    for by in [-250, -99, 120, 250] {
        for seed in 0..10 {
            let p = Params {
                force_step: Some((4_000 + 733 * seed as i64, by)),
                ..p
            };
            let o = run(seed, &p);
            assert!(
                o.violations.is_empty(),
                "seed {seed}, {by} ms: {:?}",
                o.violations
            );
        }
    }
}
