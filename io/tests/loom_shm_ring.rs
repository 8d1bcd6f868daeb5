//! Loom models of the shared-memory ring (`boundary::shm_ring`): one producer and
//! one consumer across the wrap-around; every message popped exactly once, whole
//! and in order; a full ring refuses at once; loom's cells standing for the slot
//! bytes check that the indices order every write of a slot before its read and
//! every read before the slot is written again.
//!
//! `RUSTFLAGS="--cfg ergon_loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release -p ergon-io --test loom_shm_ring`
#![cfg(ergon_loom)]

use ergon_io::boundary::shm_ring::{heap, PushError, ShmConsumer, ShmProducer};
use loom::thread;

fn push(p: &mut ShmProducer, v: u8) -> Result<(), PushError> {
    p.push(|b| {
        b[0] = v;
        b[1] = !v;
        2
    })
}

fn pop(c: &mut ShmConsumer) -> Option<u8> {
    c.pop(|b| {
        assert_eq!(b.len(), 2, "a message comes back whole");
        assert_eq!(b[1], !b[0], "torn message");
        b[0]
    })
    .expect("never corrupt")
}

#[test]
fn spsc_across_the_wrap_around_in_order_each_once() {
    loom::model(|| {
        let (mut p, mut c) = heap(2, 8).unwrap();
        // Advance both indices by one so the pushes below cross the wrap-around.
        push(&mut p, 9).unwrap();
        assert_eq!(pop(&mut c), Some(9));
        let t = thread::spawn(move || {
            let mut accepted = Vec::new();
            for v in 1..=3u8 {
                thread::yield_now();
                match push(&mut p, v) {
                    Ok(()) => accepted.push(v),
                    Err(PushError::Full) => {}
                    Err(PushError::Corrupt) => panic!("corrupt"),
                }
            }
            accepted
        });
        let mut out = Vec::new();
        for _ in 0..2 {
            thread::yield_now();
            out.extend(pop(&mut c));
        }
        let accepted = t.join().unwrap();
        out.extend(std::iter::from_fn(|| pop(&mut c)));
        assert_eq!(out, accepted, "lost, duplicated or reordered");
        assert!(!accepted.is_empty());
    });
}

#[test]
fn a_full_ring_refuses_at_once_and_frees_after_a_pop() {
    loom::model(|| {
        let (mut p, mut c) = heap(1, 8).unwrap();
        push(&mut p, 1).unwrap();
        assert_eq!(push(&mut p, 2), Err(PushError::Full));
        let t = thread::spawn(move || pop(&mut c));
        let got = t.join().unwrap();
        assert_eq!(got, Some(1));
        push(&mut p, 3).unwrap();
    });
}
