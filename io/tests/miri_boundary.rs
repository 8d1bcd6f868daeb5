//! The unsafe of the cross-thread boundary that needs no system call (the ring,
//! the mailbox built on it, the seqlock, the shared-memory ring), driven directly with real threads, so
//! that Miri checks every access for undefined behaviour and data races:
//!
//! ```text
//! cargo +nightly miri test -p ergon-io --test miri_boundary
//! ```
//!
//! Heap values (`Box`) go through the queues so a double drop, a leak of a value
//! left in a dropped ring, or a read of an unwritten slot is caught. Counts are
//! small under Miri (it runs the code a thousand times slower) and larger on a
//! normal run, where these are plain stress tests.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use ergon_io::boundary::mailbox::mailbox;
use ergon_io::boundary::ring::bounded;
use ergon_io::boundary::seqlock::seqlock;

/// Values per producer.
const N: u64 = if cfg!(miri) { 40 } else { 20_000 };
const PRODUCERS: u64 = if cfg!(miri) { 3 } else { 4 };

#[test]
fn ring_many_producers_one_consumer_every_value_once_in_order_per_producer() {
    let (tx, mut rx) = bounded::<Box<(u64, u64)>>(4).unwrap();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let tx = tx.clone();
            thread::spawn(move || {
                for i in 0..N {
                    let mut v = Box::new((p, i));
                    loop {
                        match tx.push(v) {
                            Ok(()) => break,
                            Err(full) => {
                                v = full.0;
                                thread::yield_now();
                            }
                        }
                    }
                }
            })
        })
        .collect();
    drop(tx);
    let mut next = vec![0u64; PRODUCERS as usize];
    let mut got = 0;
    while got < PRODUCERS * N {
        match rx.pop() {
            Some(v) => {
                let (p, i) = *v;
                assert_eq!(next[p as usize], i, "producer {p} out of order");
                next[p as usize] += 1;
                got += 1;
            }
            None => thread::yield_now(),
        }
    }
    for t in producers {
        t.join().unwrap();
    }
    assert!(rx.pop().is_none());
}

#[test]
fn a_ring_dropped_with_values_in_it_drops_each_once() {
    let marker = Arc::new(());
    let (tx, rx) = bounded::<Arc<()>>(8).unwrap();
    let t = {
        let (tx, marker) = (tx.clone(), marker.clone());
        thread::spawn(move || {
            for _ in 0..5 {
                tx.push(marker.clone()).unwrap();
            }
        })
    };
    t.join().unwrap();
    assert_eq!(Arc::strong_count(&marker), 6);
    drop((tx, rx));
    assert_eq!(Arc::strong_count(&marker), 1);
}

#[test]
fn mailbox_answers_from_another_thread_spend_one_credit_each() {
    let (outbox, mut inbox) = mailbox::<Box<u64>>(4).unwrap();
    let (to_loop, mut loop_rx) = bounded(4).unwrap();
    let rounds = N / 4;
    let lp = thread::spawn(move || {
        let mut served = 0;
        while served < rounds {
            match loop_rx.pop() {
                Some((credit, v)) => {
                    outbox.deliver(credit, Box::new(v * 2)).unwrap();
                    served += 1;
                }
                None => thread::yield_now(),
            }
        }
    });
    let (mut sent, mut answered, mut sum) = (0u64, 0u64, 0u64);
    while answered < rounds {
        if sent < rounds {
            if let Some(credit) = inbox.reserve() {
                match to_loop.push((credit, sent)) {
                    Ok(()) => sent += 1,
                    Err(full) => inbox.cancel(full.0 .0),
                }
            }
        }
        if let Some(v) = inbox.pop() {
            sum += *v;
            answered += 1;
        } else {
            thread::yield_now();
        }
        assert!(inbox.outstanding() <= inbox.capacity());
    }
    lp.join().unwrap();
    assert_eq!(sum, rounds * (rounds - 1));
    assert_eq!(inbox.outstanding(), 0);
}

#[test]
fn seqlock_readers_never_see_a_torn_snapshot() {
    let (mut w, r) = seqlock::<4>();
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (r, done) = (r.clone(), done.clone());
            thread::spawn(move || {
                let mut out = [0u64; 4];
                let mut seen = 0;
                while !done.load(Ordering::Acquire) {
                    if r.try_read(&mut out).is_some() {
                        // Every word of one publish is the same number.
                        assert!(out.iter().all(|&x| x == out[0]), "torn: {out:?}");
                        seen += 1;
                    }
                    thread::yield_now();
                }
                seen
            })
        })
        .collect();
    for i in 1..=N / 4 {
        w.publish(&[i; 4]);
        thread::yield_now();
    }
    done.store(true, Ordering::Release);
    for t in readers {
        t.join().unwrap();
    }
    let mut out = [0u64; 4];
    r.read(&mut out);
    assert_eq!(out, [N / 4; 4]);
}

#[test]
fn shm_ring_one_producer_one_consumer_every_message_whole_once_in_order() {
    use ergon_io::boundary::shm_ring::{heap, PushError};
    let (mut p, mut c) = heap(4, 32).unwrap();
    let t = thread::spawn(move || {
        for i in 0..N {
            loop {
                let r = p.push(|b| {
                    b[..8].copy_from_slice(&i.to_le_bytes());
                    b[8..16].copy_from_slice(&(!i).to_le_bytes());
                    16 + (i % 8) as usize
                });
                match r {
                    Ok(()) => break,
                    Err(PushError::Full) => thread::yield_now(),
                    Err(PushError::Corrupt) => panic!("corrupt"),
                }
            }
        }
    });
    let mut next = 0u64;
    while next < N {
        let got = c
            .pop(|b| {
                let i = u64::from_le_bytes(b[..8].try_into().unwrap());
                let j = u64::from_le_bytes(b[8..16].try_into().unwrap());
                assert_eq!(j, !i, "torn message");
                assert_eq!(b.len(), 16 + (i % 8) as usize);
                i
            })
            .unwrap();
        match got {
            Some(i) => {
                assert_eq!(i, next, "out of order");
                next += 1;
            }
            None => thread::yield_now(),
        }
    }
    t.join().unwrap();
    assert_eq!(c.pop(|b| b.len()).unwrap(), None);
}

/// A hostile peer: while the gateway's side reads (and writes) a shared ring,
/// another process rewrites every word of it, indices, lengths and the very slot
/// being copied included. Here that process is a thread storing atomic words
/// (what another process's stores are to this one), so Miri reports any read of
/// the shared bytes that is not atomic (a `&[u8]` over a slot) as a data race.
/// The ring must answer Corrupt or hand over garbage, never a panic, never an
/// access out of bounds, never undefined behaviour.
#[test]
fn shm_ring_a_peer_scribbling_every_word_at_once_is_no_undefined_behaviour() {
    use ergon_io::boundary::shm_ring::{Indices, Keep, ShmConsumer, ShmProducer};
    use std::sync::atomic::AtomicU64;
    const CAP: usize = 4;
    const SLOT: usize = 32;
    struct Block {
        idx: Box<Indices>,
        slots: Box<[AtomicU64]>,
    }
    // SAFETY: the test's block is only accessed through atomics.
    unsafe impl Sync for Block {}
    // SAFETY: as above.
    unsafe impl Send for Block {}
    let block = Arc::new(Block {
        idx: Box::new(Indices::new()),
        slots: (0..CAP * SLOT / 8).map(|_| AtomicU64::new(0)).collect(),
    });
    let idx: *const Indices = &*block.idx;
    let slots = block.slots.as_ptr() as *mut u8;
    let keep: Keep = block.clone();
    // SAFETY: the block lives while `keep` does; the contract asks nothing of
    // the other writer.
    let mut c = unsafe { ShmConsumer::from_raw(idx, slots, CAP, SLOT, keep.clone()) }.unwrap();
    // SAFETY: as above.
    let mut p = unsafe { ShmProducer::from_raw(idx, slots, CAP, SLOT, keep) }.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = if cfg!(miri) { 30 } else { 20_000 };
    let scribbler = {
        let (stop, block) = (stop.clone(), block.clone());
        thread::spawn(move || {
            // The two indices (words 0 and 16 of the Indices block) and every
            // slot word, with values that are sometimes in range.
            let idx = &*block.idx as *const Indices as *const AtomicU64;
            let mut words: Vec<*const AtomicU64> =
                block.slots.iter().map(|w| w as *const AtomicU64).collect();
            // SAFETY: words 0 and 16 of the 256-byte, 128-aligned Indices.
            words.extend(unsafe { [idx, idx.add(16)] });
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            while !stop.load(Ordering::Relaxed) {
                for &w in &words {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let v = if x % 3 == 0 { x % 40 } else { x };
                    // SAFETY: an aligned word inside the block, which `block` keeps.
                    unsafe { &*w }.store(v, Ordering::Relaxed);
                }
                thread::yield_now();
            }
        })
    };
    let (mut popped, mut corrupt, mut refused) = (0u32, 0u32, 0u32);
    for i in 0..rounds {
        match p.push(|b| {
            b[..8].copy_from_slice(&(i as u64).to_le_bytes());
            8
        }) {
            Ok(()) => {}
            Err(_) => refused += 1,
        }
        match c.pop(|b| b.iter().map(|&x| u32::from(x)).sum::<u32>()) {
            Ok(Some(_)) => popped += 1,
            Ok(None) => {}
            Err(_) => corrupt += 1,
        }
    }
    stop.store(true, Ordering::Relaxed);
    scribbler.join().unwrap();
    // Every round ended in one of the answers above, none in a panic.
    assert!(popped + corrupt + refused > 0);
}
