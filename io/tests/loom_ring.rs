//! Loom models of the submit queue (`boundary::ring`): push and pop across the
//! wrap-around, with one and with two producers; each value popped exactly once,
//! in order per producer; a full queue hands the value back at once.
//!
//! The models never spin-wait on another thread: each thread makes a bounded
//! number of attempts, then the main thread joins and drains, and the checks
//! compare what was accepted with what came out.
//!
//! Each attempt starts with a `yield_now`: loom's DPOR remembers only the last
//! access to an atomic, so a consumer's load followed by the producer's own load
//! and store of the same slot is never replayed in the other order unless the
//! scheduler is given that choice (without the yields a Relaxed publish passes).
//!
//! `RUSTFLAGS="--cfg ergon_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p ergon-io --test loom_ring`
#![cfg(ergon_loom)]

use ergon_io::boundary::ring::{bounded, Consumer, Full, Producer};
use loom::thread;

/// Up to `n` pops, each after a yield.
fn pop_some(rx: &mut Consumer<u32>, n: usize) -> Vec<u32> {
    (0..n)
        .filter_map(|_| {
            thread::yield_now();
            rx.pop()
        })
        .collect()
}

/// A ring of 2 whose next position is 1, so two pushes cross the wrap-around.
fn advanced() -> (Producer<u32>, Consumer<u32>) {
    let (tx, mut rx) = bounded::<u32>(2).unwrap();
    tx.push(99).unwrap();
    assert_eq!(rx.pop(), Some(99));
    (tx, rx)
}

/// Pushes each value once; returns those accepted, checking that a refused value
/// came back untouched.
fn push_all(tx: &Producer<u32>, values: &[u32]) -> Vec<u32> {
    let mut accepted = Vec::new();
    for &v in values {
        thread::yield_now();
        match tx.push(v) {
            Ok(()) => accepted.push(v),
            Err(Full(back)) => assert_eq!(back, v, "Full must hand back the value"),
        }
    }
    accepted
}

#[test]
fn spsc_wraps_around_in_order() {
    loom::model(|| {
        let (tx, mut rx) = advanced();
        let p = thread::spawn(move || push_all(&tx, &[1, 2, 3]));
        let mut out = pop_some(&mut rx, 2);
        let accepted = p.join().unwrap();
        out.extend(std::iter::from_fn(|| rx.pop()));
        assert_eq!(out, accepted, "lost, duplicated or reordered");
        // Two slots: the first two pushes always fit.
        assert!(
            accepted.starts_with(&[1, 2]),
            "refused with room: {accepted:?}"
        );
    });
}

#[test]
fn two_producers_across_the_wrap_each_value_once() {
    loom::model(|| {
        let (tx, mut rx) = advanced();
        let tx2 = tx.clone();
        let a = thread::spawn(move || push_all(&tx, &[10, 11]));
        let b = thread::spawn(move || push_all(&tx2, &[20]));
        let mut out = pop_some(&mut rx, 1);
        let mut accepted = a.join().unwrap();
        let from_b = b.join().unwrap();
        out.extend(std::iter::from_fn(|| rx.pop()));
        let pos = |x| out.iter().position(|&v| v == x);
        if let (Some(i), Some(j)) = (pos(10), pos(11)) {
            assert!(i < j, "one producer's order broken: {out:?}");
        }
        accepted.extend(from_b);
        accepted.sort_unstable();
        out.sort_unstable();
        assert_eq!(out, accepted, "lost or duplicated");
        // Three pushes, two slots, at most one pop in between: at least two fit.
        assert!(accepted.len() >= 2, "refused with room: {accepted:?}");
    });
}

#[test]
fn full_is_immediate_and_loses_nothing() {
    loom::model(|| {
        let (tx, mut rx) = bounded::<u32>(2).unwrap();
        tx.push(1).unwrap();
        tx.push(2).unwrap();
        let t = thread::spawn(move || push_all(&tx, &[3]));
        let first = pop_some(&mut rx, 1).first().copied();
        let accepted = t.join().unwrap();
        assert_eq!(first, Some(1));
        assert_eq!(rx.pop(), Some(2));
        assert_eq!(rx.pop(), accepted.first().copied());
        assert_eq!(rx.pop(), None);
    });
}

#[test]
fn values_left_in_the_queue_are_dropped_once() {
    loom::model(|| {
        let (tx, rx) = bounded::<loom::sync::Arc<()>>(2).unwrap();
        let v = loom::sync::Arc::new(());
        let t = {
            let v = v.clone();
            thread::spawn(move || tx.push(v).is_ok())
        };
        assert!(t.join().unwrap());
        drop(rx);
        // The queue's copy was dropped with the ring: only ours is left.
        assert_eq!(loom::sync::Arc::strong_count(&v), 1);
    });
}
