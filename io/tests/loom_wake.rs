//! Loom models of the wake handshake (`boundary::wake`): a submit racing the
//! loop's park never leaves the loop asleep with work queued (loom reports the
//! stuck loop as a deadlock: the eventfd model has no timeout), the eventfd is
//! written at most once per park, and never while the loop does not park.
//!
//! `RUSTFLAGS="--cfg ergon_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p ergon-io --test loom_wake`
#![cfg(ergon_loom)]

use ergon_io::boundary::ring::{bounded, Consumer};
use ergon_io::boundary::wake::{pair, Parker};
use loom::thread;

/// The loop: take values; when none is there, park until woken. Every turn either
/// takes a value, finds one pending, or consumes a wakeup, so it ends.
fn run_loop(rx: &mut Consumer<u32>, parker: &mut Parker, expect: usize) {
    let mut got = 0;
    let mut turns = 0;
    while got < expect {
        turns += 1;
        assert!(turns <= 3 * expect + 2, "the loop spins");
        // Lets loom try the submitters first (see loom_ring.rs on DPOR).
        thread::yield_now();
        if rx.pop().is_some() {
            got += 1;
            continue;
        }
        if parker.prepare_park(|| rx.ready()) {
            parker.wait(None);
            parker.unpark();
        }
    }
}

#[test]
fn submit_vs_park_one_submitter() {
    loom::model(|| {
        let (tx, mut rx) = bounded::<u32>(2).unwrap();
        let (mut parker, waker) = pair().unwrap();
        let w = waker.clone();
        let s = thread::spawn(move || {
            tx.push(1).unwrap();
            w.notify();
        });
        run_loop(&mut rx, &mut parker, 1);
        s.join().unwrap();
        assert!(
            waker.writes() <= parker.parks(),
            "{} eventfd writes for {} parks: a write while awake",
            waker.writes(),
            parker.parks()
        );
    });
}

#[test]
fn submit_vs_park_two_submitters() {
    loom::model(|| {
        let (tx, mut rx) = bounded::<u32>(2).unwrap();
        let (mut parker, waker) = pair().unwrap();
        let hs: Vec<_> = (0..2)
            .map(|v| {
                let tx = tx.clone();
                let w = waker.clone();
                thread::spawn(move || {
                    tx.push(v).unwrap();
                    w.notify();
                })
            })
            .collect();
        run_loop(&mut rx, &mut parker, 2);
        for h in hs {
            h.join().unwrap();
        }
        assert!(waker.writes() <= parker.parks());
    });
}

#[test]
fn no_eventfd_write_while_the_loop_does_not_park() {
    loom::model(|| {
        let (tx, mut rx) = bounded::<u32>(2).unwrap();
        let (_parker, waker) = pair().unwrap();
        let w = waker.clone();
        // Busy-poll: the loop polls and never announces a park.
        let s = thread::spawn(move || {
            tx.push(1).unwrap();
            w.notify()
        });
        thread::yield_now();
        let early = rx.pop();
        let wrote = s.join().unwrap();
        assert!(!wrote, "wrote the eventfd while the loop was awake");
        assert_eq!(early.or_else(|| rx.pop()), Some(1));
        assert_eq!(waker.writes(), 0);
    });
}

#[test]
fn at_most_one_write_per_park() {
    loom::model(|| {
        let (tx, mut rx) = bounded::<u32>(2).unwrap();
        let (mut parker, waker) = pair().unwrap();
        // The loop has announced a park and is asleep; two submitters race to wake it.
        assert!(parker.prepare_park(|| rx.ready()));
        let hs: Vec<_> = (0..2)
            .map(|v| {
                let tx = tx.clone();
                let w = waker.clone();
                thread::spawn(move || {
                    tx.push(v).unwrap();
                    w.notify()
                })
            })
            .collect();
        parker.wait(None);
        parker.unpark();
        let wrote: usize = hs.into_iter().map(|h| usize::from(h.join().unwrap())).sum();
        assert_eq!(wrote, 1, "one park, {wrote} eventfd writes");
        assert_eq!(waker.writes(), 1);
        assert!(rx.pop().is_some() && rx.pop().is_some());
    });
}

#[test]
fn a_stop_request_wakes_a_parking_loop() {
    // The service's park declines on a submission or a stop flag; a stopper sets
    // the flag, then notifies. The loop must not sleep through the stop.
    use loom::sync::atomic::{AtomicU8, Ordering};
    use loom::sync::Arc;
    loom::model(|| {
        let (_tx, rx) = bounded::<u32>(2).unwrap();
        let (mut parker, waker) = pair().unwrap();
        let stop = Arc::new(AtomicU8::new(0));
        let s = {
            let stop = stop.clone();
            thread::spawn(move || {
                stop.store(1, Ordering::Release);
                waker.notify();
            })
        };
        let mut turns = 0;
        while stop.load(Ordering::Acquire) == 0 {
            turns += 1;
            assert!(turns <= 3, "the loop spins");
            thread::yield_now();
            let pending = || rx.ready() || stop.load(Ordering::Acquire) != 0;
            if parker.prepare_park(pending) {
                parker.wait(None);
                parker.unpark();
            }
        }
        s.join().unwrap();
    });
}
