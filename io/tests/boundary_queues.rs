//! The boundary's structures on real threads: many producers through the submit
//! ring, the wake handshake with a real eventfd (parked and busy-poll), the
//! seqlock under a writer that never pauses, and the stats snapshot round trip.
//! Bounded counts and generous timeouts: not flaky on a loaded 2-core machine.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use ergon_core::{Budget, Class, Part, Spec};
use ergon_io::boundary::mailbox::mailbox;
use ergon_io::boundary::ring::{bounded, CapacityError, Full};
use ergon_io::boundary::seqlock::seqlock;
use ergon_io::boundary::stats::{stats_channel, ClientCounters};
use ergon_io::boundary::wake::pair;

const PRODUCERS: u64 = 4;
const PER_PRODUCER: u64 = 50_000;

#[test]
fn capacities_that_cannot_work_are_refused() {
    for bad in [0, 1, 3, 6, 1000] {
        assert_eq!(
            bounded::<u8>(bad).unwrap_err(),
            CapacityError::Invalid(bad),
            "{bad}"
        );
    }
    assert!(bounded::<u8>(2).is_ok());
    assert!(mailbox::<u8>(3).is_err());
}

#[test]
fn a_full_ring_refuses_at_once_and_hands_the_value_back() {
    let (tx, mut rx) = bounded::<String>(4).unwrap();
    for i in 0..4 {
        tx.push(i.to_string()).unwrap();
    }
    let Err(Full(back)) = tx.push("five".to_string()) else {
        panic!("a fifth value fit in four slots");
    };
    assert_eq!(back, "five");
    assert_eq!(rx.pop().as_deref(), Some("0"));
    tx.push(back).unwrap();
    let rest: Vec<String> = std::iter::from_fn(|| rx.pop()).collect();
    assert_eq!(rest, ["1", "2", "3", "five"]);
}

/// The loop side of a real-threads run: pops until every producer's values are in,
/// parking on the eventfd (with a 10 s safety timeout) when `park` is set.
/// Returns (per-producer counts, parks that only the timeout ended).
fn consume(
    rx: &mut ergon_io::boundary::ring::Consumer<(u64, u64)>,
    parker: &mut ergon_io::boundary::wake::Parker,
    park: bool,
) -> ([u64; PRODUCERS as usize], u64) {
    let mut next = [0u64; PRODUCERS as usize];
    let mut timed_out = 0;
    let total = PRODUCERS * PER_PRODUCER;
    let mut got = 0;
    while got < total {
        if let Some((p, v)) = rx.pop() {
            assert_eq!(
                v, next[p as usize],
                "producer {p}: lost, duplicated or reordered"
            );
            next[p as usize] += 1;
            got += 1;
            continue;
        }
        if park && parker.prepare_park(|| rx.ready()) {
            if !parker.wait(Some(Duration::from_secs(10))) {
                timed_out += 1;
            }
            parker.unpark();
        } else {
            std::hint::spin_loop();
        }
    }
    (next, timed_out)
}

fn run_producers(park: bool) -> (u64, u64, u64) {
    let (tx, mut rx) = bounded::<(u64, u64)>(256).unwrap();
    let (mut parker, waker) = pair().unwrap();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let tx = tx.clone();
            let waker = waker.clone();
            thread::spawn(move || {
                for v in 0..PER_PRODUCER {
                    let mut item = (p, v);
                    loop {
                        match tx.push(item) {
                            Ok(()) => break,
                            Err(Full(back)) => {
                                item = back;
                                thread::yield_now();
                            }
                        }
                    }
                    waker.notify();
                    if v % 1024 == 0 {
                        // Let the loop run dry and park now and then.
                        thread::sleep(Duration::from_micros(50));
                    }
                }
            })
        })
        .collect();
    let (counts, timed_out) = consume(&mut rx, &mut parker, park);
    for h in producers {
        h.join().unwrap();
    }
    assert_eq!(counts, [PER_PRODUCER; PRODUCERS as usize]);
    assert_eq!(rx.pop(), None, "more values than were pushed");
    (waker.writes(), parker.parks(), timed_out)
}

#[test]
fn many_producers_parked_loop_no_value_lost_no_wakeup_lost() {
    let (writes, parks, timed_out) = run_producers(true);
    assert_eq!(
        timed_out, 0,
        "a park ended by its 10 s timeout: a lost wakeup"
    );
    assert!(parks > 0, "the loop never parked: the test proved nothing");
    assert!(
        writes <= parks,
        "{writes} eventfd writes for {parks} parks: writes while awake"
    );
}

#[test]
fn busy_poll_loop_gets_no_eventfd_write() {
    let (writes, parks, _) = run_producers(false);
    assert_eq!(parks, 0);
    assert_eq!(writes, 0, "busy-poll mode must not see one eventfd write");
}

#[test]
fn seqlock_reader_never_sees_a_torn_copy() {
    const N: usize = 64;
    let (mut w, r) = seqlock::<N>();
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let r = r.clone();
            let done = done.clone();
            thread::spawn(move || {
                let mut out = [0u64; N];
                let (mut reads, mut last) = (0u64, 0u64);
                while !done.load(Ordering::Relaxed) || reads < 10 {
                    let v = r.read(&mut out);
                    assert!(out.iter().all(|&x| x == out[0]), "torn copy: {out:?}");
                    assert_eq!(out[0], v, "version and contents disagree");
                    assert!(v >= last, "went back in time");
                    last = v;
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    for i in 1..=200_000u64 {
        w.publish(&[i; N]);
    }
    done.store(true, Ordering::Relaxed);
    for h in readers {
        assert!(h.join().unwrap() >= 10);
    }
    assert_eq!(w.version(), 200_000);
}

#[test]
fn stats_snapshot_round_trips_every_field() {
    let mut b = Budget::builder();
    let weight = b
        .add("weight", Spec::sliding(1200, 60_000_000_000, 60))
        .unwrap();
    let orders = b.add("orders", Spec::fixed(10, 1_000_000_000)).unwrap();
    let flight = b.add("in_flight", Spec::in_flight(4)).unwrap();
    let mut budget = b.build(0).unwrap();
    let parts = [
        Part::new(weight, 5),
        Part::new(orders, 1),
        Part::new(flight, 1),
    ];
    for i in 0..12 {
        let _ = budget.try_charge(&parts, Class::Normal, i);
    }
    budget.observe_used(weight, 700, 20).unwrap();
    budget.observe_used_at(orders, 3, 19, 20).unwrap();
    budget.throttled(orders, Some(5_000_000), 21).unwrap();
    budget.banned(weight, 9_000_000_000, 22).unwrap();
    let client = ClientCounters {
        requests: 12,
        sent_no: 1,
        sent_maybe: 2,
        busy: 3,
        timeouts: 4,
    };
    let (mut publisher, reader) = stats_channel();
    assert_eq!(reader.read().version, 0);
    publisher.publish(&budget, &client, 23);
    let snap = reader.read();
    assert_eq!(snap.version, 1);
    assert_eq!(snap.now_ns, 23);
    assert_eq!(snap.client, client);
    assert_eq!(snap.buckets().len(), 3);
    for id in budget.ids() {
        assert_eq!(
            snap.buckets()[id.index()],
            budget.stats(id).unwrap(),
            "{}",
            budget.name(id).unwrap()
        );
    }
    // The fields this budget exercised are not defaults: the check has teeth.
    assert!(snap.buckets()[weight.index()].halted);
    assert!(snap.buckets()[orders.index()].held_until_ns.is_some());
    assert!(snap.buckets()[flight.index()].refusals.full > 0);
    assert_eq!(snap.buckets()[orders.index()].observed_at, Some(19));
    assert_eq!(snap.buckets()[weight.index()].observed_at, None);
}
