//! The shared-memory hub in the simulator: the strategy's orders come through
//! the real `ShmClient`s and the daemon's real `Hub`; client processes are
//! killed mid-request and attach again under their names; every promise holds,
//! and a run replays bit for bit.

use ergon_sim::profile::Profile;
use ergon_sim::{run, Params};

fn hub() -> Params {
    Params {
        hub: Some(true),
        // The hub runs on Binance Spot (a Bybit run has no hub).
        venue: Some(Profile::Spot),
        ..Params::default()
    }
}

#[test]
fn client_processes_killed_mid_request_find_every_outcome_when_they_attach_again() {
    let p = hub();
    let (mut kills, mut again, mut twins, mut applied) = (0, 0, 0, 0);
    let (mut flowed, mut torn) = (0, (0, 0));
    let (mut untabled, mut untabled_read) = ((0, 0), 0);
    let mut untabled_expired = 0;
    let (mut slow, mut backlog) = (0, 0);
    let mut expired = (0, 0);
    for seed in 0..30 {
        let o = run(seed, &p);
        assert!(o.violations.is_empty(), "seed {seed}: {:?}", o.violations);
        let h = o.clients.expect("a run with the hub");
        assert_eq!(
            h.kills, h.again,
            "seed {seed}: each killed process's name attached again"
        );
        kills += h.kills;
        again += h.again;
        twins += h.twins;
        flowed += h.served_while_other_dead;
        torn = (torn.0 + h.torn.0, torn.1 + h.torn.1);
        untabled = (untabled.0 + h.untabled.0, untabled.1 + h.untabled.1);
        untabled_read += h.untabled_read;
        untabled_expired += h.untabled_expired;
        slow += h.slow.0;
        backlog = backlog.max(h.slow.1);
        expired = (expired.0 + h.expired.0, expired.1 + h.expired.1);
        applied += o.tally.get("Place Applied").copied().unwrap_or(0);
    }
    // The faults happen: processes die (and come back), twins are refused, and
    // orders flow through the hub.
    assert!(
        kills > 20 && again == kills,
        "{kills} kills, {again} attaches again"
    );
    assert!(twins > 5, "{twins} second processes refused");
    assert!(applied > 1_000, "{applied} places applied");
    // A dead process blocks nobody: the other client's requests keep ending.
    assert!(
        flowed > 100,
        "{flowed} final events while the other was dead"
    );
    // Processes die halfway through a submit (never run, checked in each run),
    // and the torn write is where the ring's next submit goes (seen unless
    // the name was dropped after --keep first: its next process has a new
    // region).
    assert!(
        torn.0 > 5 && torn.1 > 3,
        "{torn:?} torn submits (slots seen)"
    );
    // Processes die between a push and its flight-table entry, before the hub
    // took the request and after; the request is in no flight table the next
    // process finds (checked at each attach), yet its final event is read by
    // that process, once (each run's ledger), unless the name was dropped
    // after --keep first.
    assert!(
        untabled.0 > 5 && untabled.1 > 5,
        "{untabled:?} killed between a push and its entry"
    );
    assert_eq!(
        untabled_read + untabled_expired,
        untabled.0 + untabled.1,
        "each such request's final event read by the name's next process (or gone with its name after --keep)"
    );
    assert!(untabled_read > 10, "{untabled_read} read");
    // Processes return after --keep (half the runs keep 50 ms to 2 s): the hub
    // drops the name, the next process is told new (each checked: only after
    // a turn --keep past its last request's settling).
    // Half the names' processes read every 1 to 100 ms: the hub turns several
    // times between two reads, and their finals wait for them in the ring.
    assert!(
        slow > 10 && backlog > 3,
        "{slow} names read slowly, at most {backlog} finals at one read"
    );
    assert!(
        expired.0 > 2 && expired.1 > 0,
        "{expired:?} names dropped after --keep (unread finals gone with them)"
    );
}

#[test]
fn an_eighth_of_the_runs_have_the_hub_and_only_those() {
    let n = (0..64u64)
        .filter(|&s| {
            let o = run(
                s,
                &Params {
                    seconds: 1,
                    ..Params::default()
                },
            );
            assert!(o.violations.is_empty(), "seed {s}: {:?}", o.violations);
            o.clients.is_some()
        })
        .count();
    assert!((3..=16).contains(&n), "{n} of 64 runs had the hub");
}

#[test]
fn a_hub_seed_replays_bit_for_bit() {
    let p = hub();
    let (a, b) = (run(25, &p), run(25, &p));
    assert_eq!(
        (a.steps, a.actions, a.writes, &a.tally, a.clients),
        (b.steps, b.actions, b.writes, &b.tally, b.clients)
    );
    assert!(a.clients.is_some_and(|c| c.kills > 0), "{:?}", a.clients);
}

/// Seed 961 (session 16; a hub run of the default draws): with the hub's
/// `--keep` counted from a client's detach (the hub before this session), a
/// request of a dead process settled past `--keep` after the death, the hub
/// dropped the name at that very turn, and the process that attached next was
/// told new: the outcome reached nobody (`mutants.sh`'s
/// `keep-counted-from-the-detach`, 84 actions). The hub keeps a client's
/// outcomes `--keep` after its last request settled, as its documentation says.
#[test]
fn seed_961_an_outcome_that_settles_past_keep_still_waits_keep_for_its_client() {
    let o = run(961, &Params::default());
    assert!(o.violations.is_empty(), "{:?}", o.violations);
    let h = o.clients.expect("a run with the hub");
    assert_eq!(h.kills, h.again, "{h:?}");
}

/// Seed 26 with the hub (`ergon-sim --hub --seed 26`): its name is dropped
/// after `--keep`, and its next process cancels an order its earlier process
/// placed in the same gateway life. On the hub before issue 43's fix
/// (`Hub::owner` asked the served clients' blocks only) the cancel was
/// `NotYours` and never ran (311 actions); the owners file keeps the name's ids.
#[test]
fn seed_26_a_dropped_names_next_process_cancels_its_earlier_order() {
    let o = run(26, &hub());
    assert!(o.violations.is_empty(), "{:?}", o.violations);
    let h = o.clients.expect("a run with the hub");
    assert!(h.expired.0 > 0, "a name dropped after --keep: {h:?}");
}
